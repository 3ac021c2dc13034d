"""E6: one backward of a tiny kernel: what `gradcheck exec` costs over plain python before and after the program's
own work (start-up, hosting, the final report), since the program itself does almost nothing.

    python bench/programs/one_backward.py
"""

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True


@wp.kernel
def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def main() -> None:
    x = wp.array([0.1, 0.2, 0.3, 0.4], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_sum, dim=4, inputs=[x], outputs=[loss])
    tape.backward(loss)
    print("loss", float(loss.numpy()[0]), "grad", x.grad.numpy().tolist())


if __name__ == "__main__":
    main()
