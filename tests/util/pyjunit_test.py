#!/usr/bin/python3
"""pyjunit: one JUnit case per test method, failures and errors marked with
their traceback, a report that `./tether test` can count, and the exit code
that says whether everything passed.

Bazel runs this file directly (and it reports itself through pyjunit).
"""

import io
import os
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.environ.get("TEST_SRCDIR", ""),
                                "tether/tests/util"))
import pyjunit  # noqa: E402


class Sample(unittest.TestCase):
    def test_passes(self):
        pass

    def test_fails(self):
        self.assertEqual(1, 2, "one is not two")

    def test_errors(self):
        raise RuntimeError("broken <on> purpose & more")


class AllPass(unittest.TestCase):
    def test_a(self):
        pass


def run_to_xml(case):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "test.xml")
        report = io.StringIO()
        rc = pyjunit.run(case, xml_path=path, stream=report)
        return rc, ET.parse(path).getroot(), report.getvalue()


class PyJunitTest(unittest.TestCase):
    def test_every_method_is_a_case_and_failures_carry_the_traceback(self):
        rc, root, report = run_to_xml(Sample)
        self.assertEqual(rc, 1)
        suite = root.find("testsuite")
        self.assertEqual(suite.get("name"), "Sample")
        self.assertEqual(suite.get("tests"), "3")
        self.assertEqual(suite.get("failures"), "2")
        cases = {c.get("name"): c for c in root.iter("testcase")}
        self.assertEqual(sorted(cases), ["test_errors", "test_fails",
                                         "test_passes"])
        self.assertIsNone(cases["test_passes"].find("failure"))
        self.assertIn("one is not two",
                      cases["test_fails"].find("failure").get("message"))
        # Markup in a message is escaped, not breaking the XML.
        self.assertIn("broken <on> purpose & more",
                      cases["test_errors"].find("failure").get("message"))
        self.assertIn("test_fails", report)

    def test_all_passing_returns_zero(self):
        rc, root, _ = run_to_xml(AllPass)
        self.assertEqual(rc, 0)
        self.assertEqual([c.get("name") for c in root.iter("testcase")],
                         ["test_a"])
        self.assertEqual(root.find("testsuite").get("failures"), "0")

    def test_without_an_xml_path_it_writes_none(self):
        saved = os.environ.pop("XML_OUTPUT_FILE", None)
        try:
            with tempfile.TemporaryDirectory() as d:
                cwd = os.getcwd()
                os.chdir(d)
                try:
                    rc = pyjunit.run(AllPass, stream=io.StringIO())
                finally:
                    os.chdir(cwd)
                self.assertEqual(rc, 0)
                self.assertEqual(os.listdir(d), [])
        finally:
            if saved is not None:
                os.environ["XML_OUTPUT_FILE"] = saved


if __name__ == "__main__":
    sys.exit(pyjunit.run(PyJunitTest))
