"""Differential fuzzing: random well-typed graphs run on every executing target against the numpy
reference, mismatches shrunk to minimal cases and saved as regression tests.

- ``profile``: what a target claims (dtypes, ops) and which special values it is fed;
- ``values``: input arrays (NaN, +-inf, subnormals, extremes, zero-size);
- ``generator``: random graphs over every MIR primitive and HIR op;
- ``reference``: the op-by-op oracle, keeping what the tolerance needs of each output's cone;
- ``tolerance``: per dtype, ulp-aware, NaN/inf-aware comparison;
- ``deviations``: the table of known, owned deviations (nothing is excluded silently);
- ``pack``: many independent cases in one graph (one compile for many graphs);
- ``runner``: run batches on a target, bisect crashes, classify each output;
- ``shrink``: delta debugging of a mismatch down to a minimal graph;
- ``cases``: a case as IR text + input arrays (tests/fuzz/cases/);
- ``fuzz``: the long-run command ``python -m rlx_core.testing.fuzz --minutes N --targets all``.
- ``driver_setting``: ``--driver-fast-compile``'s settings, and the re-run with the drivers'
  defaults of what fails under them (counted apart as "driver fast-setting only");
- ``shards`` / ``triage``: merge runs' reports, re-checking their findings with the current code.

numpy is required here (imported at module level): this package is for tests and the long run.
``report`` (and ``deviations``, which it reads) imports without it: a run's figures load where
numpy is absent; what compares arrays, or checks refusals against the generator, imports it
when called.
"""
