"""nbgrader configuration for the course.

solutions/ holds the instructor notebooks (nbgrader "source", the only copy anyone edits); days/ holds the learner
notebooks (nbgrader "release"), generated with `make days` or `make days DAY=NN` (tools/generate_days.py). Grading
happens in a course folder of its own (see docs/instructor_guide.md), never in this repository.
"""
import os
import stat
import tempfile

c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "gpu-bootcamp"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "days"

# Notebooks detect NBGRADER_EXECUTION (set by nbgrader while it executes) and run at smoke size, so a smoke-size
# notebook takes well under a minute. The limit is per cell; the default 30 s is too tight for a slow laptop.
c.Execute.timeout = 300
# Kernels talk to nbgrader over Unix sockets, not TCP ports. A TCP kernel's ports are picked free by nbgrader, released,
# then bound by the kernel a second later; any process that opens a connection in between can take one, and the
# kernel dies before it starts ("Kernel died before replying to kernel_info", jupyter_client issue 487). The
# distributed days' process groups open many connections, so grading them next to other work hit it. A TCP kernel also
# logs "running over TCP without encryption" at every start. The sockets live in a folder only this user may enter,
# with a short path (a Unix socket's path must stay under about 100 characters, which a home folder's runtime
# directory can exceed), one name per nbgrader process: nbgrader runs one kernel at a time. Where that folder is not
# private or the path would be too long, kernels keep TCP.
if os.name == "posix":
    _sockets = os.path.join(tempfile.gettempdir(), f"nbgrader-kernels-{os.getuid()}")
    os.makedirs(_sockets, mode=0o700, exist_ok=True)
    _folder = os.stat(_sockets)
    _prefix = os.path.join(_sockets, f"k{os.getpid()}")
    if _folder.st_uid == os.getuid() and stat.S_IMODE(_folder.st_mode) == 0o700 and len(_prefix) < 90:
        c.KernelManager.transport = "ipc"
        c.KernelManager.ip = _prefix
# A learner's stub must fail loudly, and a crash in one cell must not stop the others from being graded.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Feedback must never show hidden tests: nbgrader's default feedback prints every test cell in full. The course's
# preprocessor replaces hidden blocks with a placeholder and redacts output lines that quote them (points and
# pass/fail are kept). The instructor package is installed (editable) next to utils, so this import works from any
# course folder.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "instructor.feedback.RedactHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
