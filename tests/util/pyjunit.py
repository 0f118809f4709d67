"""Runs one unittest.TestCase class for Bazel, the way `./tether test` counts.

    sys.path.insert(0, os.path.join(RUNFILES, "tests/util"))
    import pyjunit
    ...
    if __name__ == "__main__":
        sys.exit(pyjunit.run(MyTest))

Prints the usual verbose unittest report on stdout and writes one JUnit
<testcase> per test method (with a <failure> carrying the traceback's last
500 characters for a failure or an error) to $XML_OUTPUT_FILE, which Bazel
sets for every test. Returns the exit code: 0 when every test passed.
Standard library only (runs under Debian's /usr/bin/python3).
"""

import os
import sys
import traceback
import unittest
from xml.sax.saxutils import quoteattr


def run(case, xml_path=None, stream=None):
    """Runs every test of `case`; writes the XML to `xml_path` (default
    $XML_OUTPUT_FILE; none when unset) and the report to `stream` (default
    stdout). Returns 0 if all passed, else 1."""
    if xml_path is None:
        xml_path = os.environ.get("XML_OUTPUT_FILE")
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    results = []  # (test, None or the formatted error), in run order

    class Result(unittest.TextTestResult):
        def addSuccess(self, test):
            super().addSuccess(test)
            results.append((test, None))

        def addFailure(self, test, err):
            super().addFailure(test, err)
            results.append((test, "".join(traceback.format_exception(*err))))

        def addError(self, test, err):
            super().addError(test, err)
            results.append((test, "".join(traceback.format_exception(*err))))

    outcome = unittest.TextTestRunner(stream=stream or sys.stdout, verbosity=2,
                                      resultclass=Result).run(suite)
    if xml_path:
        name = quoteattr(case.__name__)
        with open(xml_path, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n')
            f.write(f'<testsuite name={name} tests="{len(results)}" '
                    f'failures="{sum(1 for _, e in results if e)}">\n')
            for test, error in results:
                f.write(f'<testcase name={quoteattr(test.id().split(".")[-1])} '
                        f'status="run" classname={name}>')
                if error:
                    f.write(f"<failure message={quoteattr(error[-500:])}/>")
                f.write("</testcase>\n")
            f.write("</testsuite>\n</testsuites>\n")
    return 0 if outcome.wasSuccessful() else 1
