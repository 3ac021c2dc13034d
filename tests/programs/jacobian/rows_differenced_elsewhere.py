"""Clean twin of rows_fault.py: the running sums read by one function and returned, the rows taken as their
differences by another (the reads leave the function that made them, and come back to be subtracted)."""

import numpy as np
from rows_kernels import one_hot, record


def running_sums(x, y, tape):
    sums = []
    for i in range(3):
        tape.backward(grads={y: one_hot(i)})
        sums.append(x.grad.numpy().copy())  # the running sum of rows 0..i, on purpose
    return sums


def rows_of(cumulative):
    rows = [cumulative[0]]
    for i in range(1, len(cumulative)):
        rows.append(cumulative[i] - cumulative[i - 1])
    return np.array(rows)


print(rows_of(running_sums(*record())))
