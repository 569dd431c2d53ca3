"""The learner's JupyterLab, made clearer: a Jupyter server extension, enabled by `make lab` (.jupyter/).

``course_lab.validate_summary``: nbgrader's Validate button answers with a count (how many graded test cells pass,
which still fail) and each failure's error in a few lines instead of the raw traceback.
"""


def _jupyter_server_extension_points():
    return [{"module": "course_lab.validate_summary"}]
