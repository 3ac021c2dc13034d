"""Clean twin of rows_fault.py: the row's gradient cleared by hand (``x.grad.zero_()``) after reading each row."""

import numpy as np
from rows_kernels import one_hot, record

x, y, tape = record()
rows = []
for i in range(3):
    tape.backward(grads={y: one_hot(i)})
    rows.append(x.grad.numpy().copy())
    x.grad.zero_()
print(np.array(rows))
