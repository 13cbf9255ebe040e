"""The tooling around memlog: log writers, sample generation, benchmarks, the fuzzer, the structure."""
