"""nbgrader settings for learners, wherever nbgrader runs (the Validate button, `nbgrader validate` in a terminal).

`make lab` puts this folder on JUPYTER_CONFIG_PATH, and `make setup` copies this file into the environment's
etc/jupyter/, where nbgrader looks from any folder. Without it, validation started outside the repository root falls
back to nbgrader's 30 s cell timeout, too short for some cells on a slow laptop. Keep it equal to the timeout in the
repository's nbgrader_config.py (tests/test_learner_lab.py compares them).
"""
c = get_config()  # noqa: F821  (provided by nbgrader)

c.Execute.timeout = 300
