"""Clean twin of rows_fault.py: the running sum read after each row on purpose, each row taken as the difference
of two consecutive reads (``row = g - prev``)."""

import numpy as np
from rows_kernels import one_hot, record


def jacobian_rows(x, y, tape):
    rows, prev = [], np.zeros(3, dtype=np.float32)
    for i in range(3):
        tape.backward(grads={y: one_hot(i)})
        g = x.grad.numpy().copy()  # the running sum of rows 0..i
        rows.append(g - prev)
        prev = g
    return np.array(rows)


print(jacobian_rows(*record()))
