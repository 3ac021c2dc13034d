"""Test module that defines no ``scenario`` attribute (bad-input tests)."""

VALUE = 1
