"""Placeholder: registers no commands yet."""


def register(app) -> None:
    pass
