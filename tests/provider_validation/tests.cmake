# provider validation suite: see tests/provider_validation/README.md
