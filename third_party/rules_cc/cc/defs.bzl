"""Offline stand-in for @rules_cc//cc:defs.bzl on Bazel 4.2.3.

The same names as the real rules_cc, forwarding to the native rules, so BUILD
files load from @rules_cc exactly as they would with the real rules.
"""

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
