"""SkillOpt's six environments as task sets, scorers, tools and an environment class."""

# Importing the package registers its split readers (with skillvc.tasks.taskset) and its
# scorers, the way a plugin registers its own.
from skillvc.tasks.skillopt import scorers, splits  # noqa: F401
