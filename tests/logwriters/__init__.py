"""Line writers: the exact text each supported framework prints, for the sample-log generator
(tests/samplegen), the scenario grid (tests/scenarios.py), the property tests and the benchmark
logs (benchmarks/generate.py).

One module per format family, named like its spec in parsers/: ``torchtitan``, ``deepspeed``,
``megatron``, ``nemo``, ``torchtune``, ``hf_trainer`` (with axolotl's memory keys), ``openrlhf``,
``ray``, ``verl``, ``easyr1``, ``pytorch`` (torchrun, CUDA OOM, NCCL), plus
``python`` (logging timestamps, tracebacks) and ``mixing`` (seeded randomness, torchrun's interleaving);
``snapshots`` writes what PyTorch's allocator snapshot holds (a dict, not lines: memlog snapshot, the guard).
Every writer is a plain function that returns one line (or a list of lines) without its newline,
values as keyword arguments, numbers formatted exactly as the framework formats them. Writers never
invent: a format appears here once a generator needs it and its f-string is quoted from the
framework's source (see each docstring).
"""
