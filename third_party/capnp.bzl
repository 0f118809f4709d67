"""capnp_cc_library: Cap'n Proto schemas compiled to C++ with Debian's capnp.

    load("//third_party:capnp.bzl", "capnp_cc_library")
    capnp_cc_library(
        name = "config_capnp",
        srcs = ["config.capnp"],
        deps = ["//other:schemas_capnp"],   # other capnp_cc_library targets
    )

Generates `<schema>.capnp.h` / `.capnp.c++` next to the schema (include them
as "pkg/config.capnp.h"). Schemas import each other by absolute path from the
workspace root (`import "/transport/config.capnp";`); the compiler runs from
the execution root with `-I.` plus the system include directory, so
`/capnp/c++.capnp` and `/capnp/compat/json.capnp` resolve too.

Each library also exposes `<name>_schemas`, a filegroup of its .capnp files and
those of its deps, for rules that need the schema text at run time.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def capnp_cc_library(name, srcs, deps = [], visibility = None, testonly = False, **kwargs):
    schema_deps = [d + "_schemas" for d in deps]
    # Used from another workspace (tether as @tether), tether's own schemas
    # live under external/<repo>: compile them with that prefix stripped, so
    # imports ("/transport/x.capnp"), output paths and display names are the
    # same as inside tether.
    repo = native.repository_name()
    prefix = "" if repo == "@" else "external/" + repo[1:]
    native.filegroup(
        name = name + "_schemas",
        srcs = srcs + schema_deps,
        visibility = visibility,
        testonly = testonly,
    )
    gen_srcs = []
    gen_hdrs = []
    for src in srcs:
        if not src.endswith(".capnp"):
            fail("capnp_cc_library srcs must be .capnp files, got " + src)
        out_h = src + ".h"
        out_cc = src + ".c++"
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_") + "_gen",
            srcs = [src] + schema_deps,
            outs = [out_h, out_cc],
            testonly = testonly,
            # Without --src-prefix capnp writes <out>/<workspace path>.h, which
            # is where Bazel declared the outputs, and display names keep the
            # full path ("pkg/x.capnp:Type").
            cmd = ("capnp compile -I. -I/usr/include " +
                   ("-I{p} --src-prefix={p} ".format(p = prefix) if prefix else "") +
                   "-oc++:$(GENDIR)" + ("/" + prefix if prefix else "") +
                   " $(location {src}) && " +
                   # capnp writes imports of our own schemas as angle
                   # includes (<pkg/x.capnp.h>); Bazel puts generated files
                   # on the quote path, so turn those into quote includes.
                   "sed -i -E '/#include <capnp\\//! s@#include <(.*[.]capnp[.]h)>@#include \"\\1\"@' " +
                   "$(location {out_h}) $(location {out_cc})").format(
                src = src,
                out_h = out_h,
                out_cc = out_cc,
            ),
            message = "capnp compile " + src,
        )
        gen_srcs.append(out_cc)
        gen_hdrs.append(out_h)
    cc_library(
        name = name,
        srcs = gen_srcs,
        hdrs = gen_hdrs,
        deps = deps + [str(Label("//third_party:capnp"))],
        # Generated code is not ours to warn about.
        copts = ["-Wno-unused-parameter"],
        visibility = visibility,
        testonly = testonly,
        **kwargs
    )
