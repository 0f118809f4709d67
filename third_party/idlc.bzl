"""idlc_c_library: IDL types compiled to C by Debian's Cyclone DDS idlc
(/usr/bin/idlc, in package cyclonedds-tools, which ./tether installs).

    load("//third_party:idlc.bzl", "idlc_c_library")
    idlc_c_library(
        name = "frame_idl",
        srcs = ["frame.idl"],    # in the package's own directory
    )

Generates `<name>.c` / `<name>.h` for each IDL file (include them as
"pkg/frame.h"; the header has its own extern "C" guard). The generated C
must be compiled as C: g++ rejects it (`dds_alignof`). Bazel compiles `.c`
sources with the C compiler and applies `--copt` but not `--cxxopt`, so the
project's `-std=c++20` never reaches it; the library holds only the `.c`
file, with C flags.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def idlc_c_library(name, srcs, visibility = None, testonly = False):
    gen_c = []
    gen_h = []
    for src in srcs:
        if not src.endswith(".idl") or "/" in src:
            fail("idlc_c_library srcs must be .idl files in the package directory, got " + src)
        base = src[:-len(".idl")]
        native.genrule(
            name = name + "_" + base + "_gen",
            srcs = [src],
            outs = [base + ".c", base + ".h"],
            testonly = testonly,
            cmd = "idlc -l c -o $(@D) $(location {src})".format(src = src),
            message = "idlc " + src,
        )
        gen_c.append(base + ".c")
        gen_h.append(base + ".h")
    cc_library(
        name = name,
        srcs = gen_c,
        hdrs = gen_h,
        deps = ["//third_party:ddsc"],
        # C only: the C compiler's default dialect (gnu17 with gcc 12).
        # Generated code is not ours to warn about.
        copts = ["-Wno-unused-parameter", "-Wno-missing-field-initializers"],
        visibility = visibility,
        testonly = testonly,
    )
