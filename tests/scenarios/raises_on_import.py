"""Bad-input test scenario: the module itself raises while it is imported (a missing optional dependency)."""

import warp as wp

raise ImportError("this scenario needs the package 'not_installed_pkg'; pip install not_installed_pkg")


class Never:
    def params(self):
        return {}

    def forward(self):
        return wp.zeros(1)


scenario = Never
