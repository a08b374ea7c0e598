"""Float64 NumPy references written from SEMANTICS.md, shared by the test suites."""
