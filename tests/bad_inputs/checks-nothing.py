x = 1  # sets up, checks nothing


def check_add():  # not test_*: never run
    assert add(1, 2) == 3  # noqa: F821 (the answer defines add)
