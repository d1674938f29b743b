"""The classifier's rules: one module per bottleneck class, each the one home of its class.

A rule's module (``<class with _>.py``: ``idle``, ``compute_bound``, ``memory_bound``, ``latency_bound``,
``input_starved``, ``host_bound``, ``pcie_bound``, ``comms_bound``, ``stalled``, ``throttled``,
``memory_capacity``) holds, top to bottom:

* its thresholds, each with its reason and reference (the thresholds several rules share, and the window's own,
  are in :mod:`gputop.analysis.thresholds`);
* the evidence keys it adds, declared (:func:`gputop.analysis.evidence.declare`), and how it measures them;
* its score (:class:`.base.Score`: 0..1 from the window's evidence, before the arbitration table; with named
  parts where the table damps a part) and how it settles its parts into a score and a subclass;
* its sentence (``describe``), its advice by subclass, its notes and what it had to do without;
* its examples: windows of recorded traces that must fire it and windows that must not
  (tests/test_rules.py runs every rule's examples);
* ``RULE``, the :class:`.base.Rule` that holds the above.

What no rule holds: which class suppresses which (:mod:`gputop.analysis.arbitration`, one table read in order),
and how a window is measured and a verdict put together (:mod:`gputop.analysis.classify`).

To add a class:

1. a member of :class:`gputop.analysis.vocabulary.Cls` (its value and its label for people: the registry's row;
   its place there is its place in ``mixed`` lists and in the Prometheus series), and :class:`Sub` members for
   subclasses the vocabulary does not have yet;
2. its module here, named after the value (``kernel_bound.py`` for "kernel-bound"), ending in
   ``RULE = Rule(Cls.KERNEL_BOUND, score, describe, ADVICE, EVIDENCE, EXAMPLES, ...)``, with examples that fire it
   and examples of the nearest classes that must not;
3. where it suppresses another class or another suppresses it: a row of ``arbitration.TABLE``, in the place
   where what it reads is final (the table checks that at import); where it should win ties against others: its
   place in ``arbitration.TIES`` (a class not listed loses every tie);
4. the ``class`` enum of gputop/schema/monitor.schema.json and run.schema.json lists the value too
   (tests/test_rules.py says so if it does not), and tests/test_classify.py's ``every_kind_of_verdict`` has a
   window of every class (each verdict's document shape and sentence are checked there).

The classifier, the timeline, the live verdict, the exporter's series and the TUI pick the class up from the
registry; nothing else needs to know it.
"""

from __future__ import annotations

from importlib import import_module

from gputop.analysis.vocabulary import Cls, Sub


def module_name(cls: Cls) -> str:
    """The name of a class's rule module: 'kernel-bound' -> 'kernel_bound'."""
    return cls.value.replace("-", "_")


def _load(cls: Cls):
    rule = import_module(f"{__name__}.{module_name(cls)}").RULE
    if rule.cls is not cls:
        raise ValueError(f"{module_name(cls)}.RULE is the rule of {rule.cls!r}, not of {cls!r}")
    return rule


RULES = {c: _load(c) for c in Cls}  # every class's rule, in the vocabulary's order
WINDOW_RULES = {c: r for c, r in RULES.items() if not r.job_level}  # the rules one GPU's window is scored by


def describe(cls, sub, ev: dict) -> str:
    """The evidence sentence of a verdict of ``cls`` (and subclass ``sub``) from its numbers. It does not repeat
    the verdict's name: a reader shows ``display_name(verdict)`` first, then this."""
    return RULES[Cls(cls)].describe(sub, ev)


def advise(cls, sub: Sub | str | None) -> str:
    """The advice for a class and subclass (the class's own when the subclass has none)."""
    return RULES[Cls(cls)].advise(sub)
