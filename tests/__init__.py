"""The test suites (a package so that their support, tests.support, is imported by one name)."""
