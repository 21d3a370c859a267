"""``wisp eval``: does the context help on your model? Measure it.

Scripted scenarios (:mod:`.scenario`, shipped as data files in
``scenarios/``) run in real sessions against the configured endpoint, with
the memory tool off and on (:mod:`.runner`), scored with no model judge
(:mod:`.scoring`), shown as a table (:mod:`.report`) and kept
(:mod:`.history`). Issue "``wisp eval``: does the context help on your
model? Measure it"; the reference ``wisp-memory-tool.txt``, "Evaluation".

This part sits above the session: it opens sessions, and nothing below it
imports it.
"""

from .runner import EvalEndpointError, EvalOptions, EvalReport, Progress, run_eval
from .scenario import Scenario, ScenarioError, builtin_names, builtin_scenario, builtin_scenarios, load_scenario_file

__all__ = ["EvalEndpointError", "EvalOptions", "EvalReport", "Progress", "run_eval", "Scenario", "ScenarioError",
           "builtin_names", "builtin_scenario", "builtin_scenarios", "load_scenario_file"]
