# fiber unit tests
