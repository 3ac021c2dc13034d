"""A Jacobian taken row by row on one retained tape, without clearing the gradient between rows (the fault).

``tape.backward(grads={y: e_i})`` adds row i into x.grad; with no ``tape.zero()`` between the rows, the row read
after backward i carries rows 0..i-1 too: [2,0,0], [2,4,0], [2,4,6] instead of diag(2, 4, 6).
"""

import numpy as np
from rows_kernels import one_hot, record

x, y, tape = record()
rows = []
for i in range(3):
    tape.backward(grads={y: one_hot(i)})
    rows.append(x.grad.numpy().copy())  # the row read: it still carries the rows before it
print(np.array(rows))
