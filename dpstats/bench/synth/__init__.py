"""The synthetic-data benchmark (Tao, McKenna, Hay, Machanavajjhala, Miklau 2021).

It sits in the benchmark layer, above the synthesizers of :mod:`dpstats.synth`
(which sit below :mod:`dpstats.algorithms`, so that synthesize-then-estimate
algorithms can use them):

* :mod:`dpstats.bench.synth.benchmark` -- trials of ``dpstats synth bench``
  through the benchmark's workers (:class:`dpstats.bench.sandbox.WorkerPool`)
  under the protocol's limits, and the paper's summaries;
* :mod:`dpstats.bench.synth.metrics` -- the paper's utility metrics;
* :mod:`dpstats.bench.synth.figures` -- its figures (PNG).
"""
