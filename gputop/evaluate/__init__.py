"""gputop measured against truths that do not come from gputop: ``labelled.py`` (a recorded trace's diagnosis, and
what a labelled trace should be diagnosed as), ``calibration.py`` (confidence against the labels, and two other
tools' published rules on the same windows: the tables of docs/diagnosis.md), ``multi_truth.py`` (each GPU of the
multi-GPU corpus judged against its case's truth: the confusion tables per machine), ``corpus_truth.py`` (the
single-GPU corpus's label rule, and its traces' timed loops marked with their labels), ``synthetic_fleet.py`` (a
fleet's day in Prometheus whose every class is known, for the fleet reader's scale bench), ``culprit_corpus.py``
(issue 36: the culprit corpus's run documents against the truths its GPU script wrote first).

For the tests, bench/ and the docs, run from a checkout (``python -m gputop.evaluate.calibration --write``). Not
shipped in the wheel, and no module of the product imports it: it sits above the frontends (tests/test_architecture.py
LAYERS, tests/test_packaging.py). The programs that record the labelled data on a GPU stay in bench/gpu/ and import
from here."""
