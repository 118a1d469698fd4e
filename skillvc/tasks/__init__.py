"""Task sets and the scorers that grade a model's answer against them."""

# SkillOpt's environments register their split readers and scorers when the package loads.
import skillvc.tasks.skillopt  # noqa: F401
