"""A stand-in that the test suite's subprocesses import instead of the real ``rfc3987_syntax``.

jsonschema imports that optional package, when it is installed, to check the "iri" string format, and building its
grammars costs about 1.5 s of CPU in every process that imports nbformat: every ``nbgrader`` and ``papermill``
command the suite starts (a few hundred), about a tenth of the suite's CPU time. Nothing the suite checks validates an
IRI: nbformat's notebook schema has no "iri" format. Raising ImportError makes jsonschema skip that one format check,
exactly as it does on a machine without the package (``jsonschema/_format.py`` wraps the import in
``suppress(ImportError)``). tests/conftest.py puts this folder first on the subprocesses' PYTHONPATH; an instructor's
shell and the learner's lab import the real package.
"""
raise ImportError("rfc3987_syntax is replaced in the test suite's subprocesses (tests/import_shortcuts)")
