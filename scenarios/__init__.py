"""Built-in gradcheck scenarios (installed as ``gradcheck.scenarios``).

Each module exposes ``scenario`` (a class implementing the scenario contract). `gradcheck list`
reads their names, descriptions and faults from the source without importing them.
"""
