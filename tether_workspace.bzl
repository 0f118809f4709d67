"""Using tether from another Bazel workspace (WORKSPACE mode, Bazel 4).

In your WORKSPACE:

    local_repository(name = "tether", path = "/path/to/tether")
    load("@tether//:tether_workspace.bzl", "tether_dependencies")
    tether_dependencies("/path/to/tether")

and in your .bazelrc (tether is C++20):

    build --cxxopt=-std=c++20 --host_cxxopt=-std=c++20

Then depend on tether's public targets (README, "Use tether in your Bazel
project") and compile your own schemas with
load("@tether//third_party:capnp.bzl", "capnp_cc_library").
"""

def tether_dependencies(path):
    """Declares the offline stand-ins of the rule repositories Bazel 4 would
    otherwise download (rules_cc, rules_java, remote_coverage_tools), taken
    from tether's third_party/, unless the workspace declares them already.

    Args:
      path: the absolute path of the tether checkout (as given to
        local_repository).
    """
    existing = native.existing_rules()
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        if name not in existing:
            native.local_repository(
                name = name,
                path = path + "/third_party/" + name,
            )
