"""Options: user values turned into a validated ``Scenario`` and each command's calculator options (above the
calculators, whose option classes they build; below the commands, which only declare and call)."""
