"""fuzz_target: one libFuzzer target and the test that replays its corpus.

    fuzz_target(name = "x", srcs = ["x_fuzzer.cc"], deps = [...])

makes
  :x_fuzz_lib          the target (LLVMFuzzerTestOneInput), alwayslink
  :x_fuzzer            the libFuzzer binary: build it with --config=fuzz
                       (clang 14, -fsanitize=fuzzer,address); tagged manual,
                       so the ordinary build never tries to link it
  :x_corpus_test       replays tests/fuzz/corpus/x/ (corpus and crash
                       reproducers) with the ordinary compiler, in the
                       default test suite
`./tether fuzz x --time S` (tests/fuzz/run_fuzz.sh) runs the fuzzer.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

def fuzz_target(name, srcs, deps = [], corpus_test_tags = [], size = "small"):
    cc_library(
        name = name + "_fuzz_lib",
        testonly = True,
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    cc_binary(
        name = name + "_fuzzer",
        testonly = True,
        tags = ["manual", "fuzz"],
        deps = [":" + name + "_fuzz_lib"],
    )
    cc_test(
        name = name + "_corpus_test",
        size = size,
        srcs = ["corpus_replay_test.cc"],
        data = ["corpus/" + name],
        env = {"TETHER_FUZZ_CORPUS": "tests/fuzz/corpus/" + name},
        tags = corpus_test_tags,
        deps = [
            ":" + name + "_fuzz_lib",
            "//third_party:gtest_main",
        ],
    )
