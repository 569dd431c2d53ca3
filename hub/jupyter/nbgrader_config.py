"""nbgrader settings for everyone in the class: one course id, one shared exchange, each student under their own name.

Students and instructors find this file through JUPYTER_CONFIG_PATH, which hub/jupyterhub_config.py sets for every
server it starts (hub/Dockerfile puts this folder at /etc/jupyter/course-hub in the course image). An instructor's
course folder has its own nbgrader_config.py (the repository's), which nbgrader reads after this one.
Environment (set by the hub): JUPYTERHUB_USER (the hub's user name), COURSE_ROLE (``student`` or ``instructor``),
NBGRADER_EXCHANGE (the shared exchange folder), COURSE_DAYS_DIR (where released days are fetched).
"""
import os

c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.course_id = "gpu-bootcamp"
# nbgrader's default exchange: one folder that every server mounts, writable by all (nbgrader creates the course's
# inbound/, outbound/ and feedback/ folders in it with the permissions that hide one student's files from another).
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
# A released day is fetched into days/, where the learner copy of every day lives; feedback lands in
# days/dayNN/feedback/<submission time>/.
c.Exchange.assignment_dir = os.path.expanduser(os.environ.get("COURSE_DAYS_DIR", "~/course/days"))

# The class's late policy (nbgrader's LateSubmissionPlugin): a submission after the due date scores 0, its raw score
# and how late it was stay in the gradebook and the CSV. "none" only records how late it was.
c.LateSubmissionPlugin.penalty_method = "zero"

if os.environ.get("COURSE_ROLE", "student") == "instructor":
    # The formgrader on the instructor's own server grades this course folder (nbgrader's "one class, one grader").
    c.CourseDirectory.root = os.path.expanduser(os.environ.get("COURSE_GRADING_DIR", "~/grading/gpu-bootcamp"))
    # Every container runs as the same Unix user, so collect's "submitted by X but owned by Y" check would flag
    # every submission.
    c.CollectApp.check_owner = False
elif os.environ.get("JUPYTERHUB_USER"):
    # nbgrader files a submission under the Unix user name, which is the same ('learner') in every container, and it
    # only reads JUPYTERHUB_USER for a user called 'jovyan': the hub's user name is the student id.
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
