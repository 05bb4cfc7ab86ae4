"""``--model org/name[@revision]``: a model on the Hugging Face Hub, through ``huggingface_hub`` (the optional
``kvplan[hub]`` extra, imported only here, only when such an id is given).

Precedence (``kvplan.inputs.presets.load_model``): an existing local path (file or folder) first, then a preset id
(built-in or ``--presets-dir``), and only then ``org/name`` as a Hub id.

What is read: ``config.json`` and ``model.safetensors.index.json`` (small files), and the *headers* of the
safetensors shards, never their tensors (``kvplan.inputs.checkpoint``). The local Hugging Face cache comes first
(``try_to_load_from_cache``, which honours ``HF_HOME`` / ``HF_HUB_CACHE``), so any cached model works offline;
a file not cached is downloaded with ``hf_hub_download`` (the library's own token, endpoint and cache) unless
``HF_HUB_OFFLINE`` is set. Shards are never downloaded: an uncached shard's header is read remotely with
``get_safetensors_metadata`` (HTTP range requests of the header only); offline, the index's
``metadata.total_size`` stands in (exact total, expert share estimated from the parameter counts).

Before the first request to the Hub, one connection attempt of ``REACH_TIMEOUT`` seconds (through the library's own
HTTP session, so its proxy settings hold): an unreachable Hub fails then, in seconds, with a message saying how to
read only the cache (``HF_HUB_OFFLINE=1``), instead of the library's retries (~24 s).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, overload

from kvplan.errors import KvplanError, shorten

CONFIG_NAME = "config.json"
# seconds the one reachability check of the Hub waits
REACH_TIMEOUT = 3.0
INSTALL_HINT = 'pip install "kvplan[hub]"'
# Hub repo ids: owner/name of letters, digits, '-', '_', '.' (no '--' or '..'), at most 96 characters
# (huggingface_hub validate_repo_id); a revision after '@' is a branch, tag or commit.
_REPO = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,95})/([A-Za-z0-9][A-Za-z0-9._-]{0,95})(?:@([A-Za-z0-9._/-]{1,200}))?")


def parse_hub_id(ref: str) -> tuple[str, str | None] | None:
    """(repo_id, revision) when ``ref`` is written as a Hub id ``org/name`` or ``org/name@revision``."""
    m = _REPO.fullmatch(ref.strip())
    if not m or ref.endswith((".json", ".toml")):
        return None
    repo_id = f"{m.group(1)}/{m.group(2)}"
    if "--" in repo_id or ".." in repo_id or repo_id.endswith((".", "-")):
        return None
    return repo_id, m.group(3)


def _hub(ref: str, hint: str) -> Any:
    from types import SimpleNamespace

    try:
        from huggingface_hub import (
            constants,
            errors,
            get_safetensors_metadata,
            get_session,
            hf_hub_download,
            try_to_load_from_cache,
        )
    except ImportError:
        raise KvplanError(f"--model {shorten(ref)} looks like a Hugging Face model id, and reading one needs "
                          "huggingface_hub, which is not installed", f"{INSTALL_HINT}{hint}") from None
    import logging

    # the library logs each retry of an unreachable Hub on stderr ("Retrying in 8s ..."); kvplan's own one-line
    # error says what failed and how to fix it, so only the library's errors are let through
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    return SimpleNamespace(constants=constants, errors=errors, get_safetensors_metadata=get_safetensors_metadata,
                           get_session=get_session, hf_hub_download=hf_hub_download,
                           try_to_load_from_cache=try_to_load_from_cache)


class _Remote:
    """Calls into huggingface_hub for one repo and revision, its errors mapped to one-line KvplanErrors."""

    def __init__(self, hub: Any, repo_id: str, revision: str | None, hint: str) -> None:
        self.hub, self.repo_id, self.revision, self.hint = hub, repo_id, revision, hint
        self.offline = bool(hub.constants.HF_HUB_OFFLINE)
        self.label = repo_id + (f"@{revision}" if revision else "")
        self.reached = False

    def _reach(self, what: str) -> None:
        """One short connection attempt to the Hub's endpoint before the first request; unreachable: a one-line
        error now, not after the library's retries."""
        if self.reached:
            return
        endpoint = self.hub.constants.ENDPOINT
        try:
            self.hub.get_session().head(endpoint, timeout=REACH_TIMEOUT)
        except Exception as err:  # noqa: BLE001  (a connection error, a timeout: the library's HTTP client's own)
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise KvplanError(f"{self.label}: {what} is not in the Hugging Face cache and the Hub ({endpoint}) "
                              f"cannot be reached within {REACH_TIMEOUT:g} s: {shorten(first)}",
                              f"connect (or set HF_ENDPOINT), set HF_HUB_OFFLINE=1 to read only the local cache, or "
                              f"give the model folder's path{self.hint}") from None
        self.reached = True

    def _lookup(self, filename: str):
        """The cache's answer: a path, the library's "known absent" marker (``.no_exist``: the Hub answered 404
        once), or None (never asked)."""
        try:
            return self.hub.try_to_load_from_cache(self.repo_id, filename, revision=self.revision)
        except Exception as err:  # a malformed cache entry, an invalid revision  # noqa: BLE001
            raise self._error(err, filename) from None

    def cached(self, filename: str) -> Path | None:
        """The file's path in the local cache, or None (not cached, or cached as absent)."""
        found = self._lookup(filename)
        return Path(found) if isinstance(found, str) else None

    @overload
    def get(self, filename: str, required: Literal[True]) -> Path: ...

    @overload
    def get(self, filename: str, required: bool) -> Path | None: ...

    def get(self, filename: str, required: bool) -> Path | None:
        """The file from the cache, else downloaded (online); None when the repo has no such file. A file the
        cache records as absent is not asked for again, so a cached model needs no network even without
        HF_HUB_OFFLINE."""
        found = self._lookup(filename)
        path = Path(found) if isinstance(found, str) else None
        known_absent = found is not None and path is None
        if path is not None or ((self.offline or known_absent) and not required):
            return path
        if self.offline:
            raise KvplanError(f"{self.label}: {filename} is not in the Hugging Face cache "
                              f"({self.hub.constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set",
                              f"download it once online (hf download {self.repo_id} {filename}), unset "
                              f"HF_HUB_OFFLINE, or give the model folder's path{self.hint}")
        self._reach(filename)
        errors = self.hub.errors
        try:
            return Path(self.hub.hf_hub_download(self.repo_id, filename, revision=self.revision))
        except errors.LocalEntryNotFoundError as err:  # (a subclass of EntryNotFoundError) the Hub unreachable
            raise self._error(err, filename) from None
        except errors.EntryNotFoundError:
            if required:
                raise KvplanError(f"{self.label} has no {filename}", f"give a transformers model repo{self.hint}")\
                    from None
            return None
        except Exception as err:  # noqa: BLE001
            raise self._error(err, filename) from None

    def headers(self, names: list[str]) -> list:
        """The tensors of the safetensors headers of ``names``, read remotely (header bytes only)."""
        from kvplan.inputs.checkpoint import tensors

        known_absent = [n for n in names if (f := self._lookup(n)) is not None and not isinstance(f, str)]
        if names and len(known_absent) == len(names):   # the cache says the Hub has none of them: no request
            return []
        self._reach("the safetensors headers")
        errors = self.hub.errors
        try:
            meta = self.hub.get_safetensors_metadata(self.repo_id, revision=self.revision)
        except errors.NotASafetensorsRepoError:
            return []
        except Exception as err:  # noqa: BLE001
            raise self._error(err, "safetensors headers") from None
        found = []
        for name in names:
            file_meta = meta.files_metadata.get(name)
            if file_meta is None:
                raise KvplanError(f"{self.label}: the Hub lists no safetensors header for {name}",
                                  "give --weights SIZE")
            header = {t: {"dtype": i.dtype, "shape": list(i.shape), "data_offsets": list(i.data_offsets)}
                      for t, i in file_meta.tensors.items()}
            found += tensors(header, f"{self.label}/{name}")
        return found

    def _error(self, err: Exception, what: str) -> KvplanError:
        errors = self.hub.errors
        if isinstance(err, errors.GatedRepoError):
            return KvplanError(f"{self.label} is a gated model and this machine has no access to it",
                               "accept its license on huggingface.co and log in (hf auth login, or set HF_TOKEN)")
        if isinstance(err, errors.RepositoryNotFoundError):
            return KvplanError(f"{self.label}: no such model on the Hugging Face Hub (or it is private)",
                               f"check the id, or log in (hf auth login, or set HF_TOKEN){self.hint}")
        if isinstance(err, errors.RevisionNotFoundError):
            return KvplanError(f"{self.label}: no revision {shorten(self.revision)}",
                               "give a branch, tag or commit of the repo after @")
        if isinstance(err, (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled)):
            return KvplanError(f"{self.label}: {what} is not in the Hugging Face cache and the Hub cannot be "
                               "reached", f"connect, or download it once (hf download {self.repo_id}){self.hint}")
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return KvplanError(f"{self.label}: cannot read {what} from the Hugging Face Hub: {first}",
                           f"check the network and HF_ENDPOINT, or give the model folder's path{self.hint}")


def load_hub_model(ref: str, preset_hint: str = ""):
    """The model a Hub id names: its config, its exact weight bytes from the safetensors headers (cache first),
    and its parameter counts from the config (``kvplan.inputs.hf_import``). ``preset_hint`` ends each fix with a
    built-in preset of the same model, when there is one."""
    from kvplan.inputs.files import read_json
    from kvplan.inputs.hf_import import find_weights, model_from_hf_config

    parsed = parse_hub_id(ref)
    if parsed is None:  # pragma: no cover - load_model calls this only for a Hub id
        raise KvplanError(f"{shorten(ref)} is not a Hugging Face model id", "write it as org/name[@revision]")
    repo_id, revision = parsed
    hint = f"; for the built-in preset give -m {preset_hint}" if preset_hint else ""
    remote = _Remote(_hub(ref, hint), repo_id, revision, hint)
    config_path = remote.get(CONFIG_NAME, required=True)
    config = read_json(config_path, "model config")

    def find(name: str) -> Path | None:
        # small files may be downloaded; shards are only ever taken from the cache
        return remote.get(name, required=False) if name.endswith(".json") else remote.cached(name)

    weights = find_weights(find, remote.label, None if remote.offline else remote.headers)
    source = f"https://huggingface.co/{repo_id}/blob/{revision or 'main'}/config.json ({config_path})"
    return model_from_hf_config(config, source, model_id=repo_id.split("/", 1)[1], weights=weights)
