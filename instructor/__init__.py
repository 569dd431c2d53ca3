"""Instructor tooling: grading a class, feedback without hidden tests, the learner-only release.

Not part of the learner package ``utils``: it needs nbgrader, and the learner release (``instructor.release``) leaves
this folder out by construction (it copies an explicit list of learner items).

    python -m instructor.grading autograde DAY        # autograde every submission, --jobs N students at once
    python -m instructor.release ../gpu-bootcamp-learners

``nbgrader_config.py`` registers ``instructor.feedback.RedactHiddenTests`` for ``nbgrader generate_feedback``.
"""
