"""Programs shipped with gradcheck to try ``gradcheck exec`` on: ``gradcheck exec -m gradcheck.examples.NAME``."""
