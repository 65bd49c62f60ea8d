"""ScalAna's analysis half as pure functions over arrays (seed 003 §III-C, §IV):

ppg.py        Program Performance Graph of one scale: intra-process and communication edges
merge.py      per-vertex statistics over ranks, k-means groups of ranks
scaling.py    Extra-P normal-form models chosen by leave-one-out cross-validation, scaling loss
abnormal.py   ranks above AbnormThd x the median rank, unusual waiting
backtrack.py  Algorithm 1: root-cause paths along data, control and communication dependences
constructs.py PSG vertices of one source construct (unrolled/inlined copies, call sites) summed per rank
causes.py     a path's cause and its cost in seconds of waiting explained
mpi_cost.py   when an MPI call is its own cause (volume per rank grows; latency model when not oversubscribed)
segments.py   exact computation between MPI calls as a check on sampled excesses
evidence_notes.py  notes when the samples are too few to resolve the floor, or the fallback sampler ran
detect.py     the whole analysis of an experiment, returning a JSON-ready dict
synthetic.py  programs and runs with known root causes, for tests and benchmarks
"""
