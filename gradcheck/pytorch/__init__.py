"""The torch side of a PyTorch program that calls Warp: seen only under ``exec`` and ``gradcheck.audit()``.

The patches a program is seen through (``patches``), each torch backward an iteration (``watch``), optimizers and
their steps (``steps``), reads of a rewritten ``.grad`` (``reads``), names (``names``), the torch<->Warp bridge
(``bridge``), statistics of tensors (``stats``), torch's autograd graph (``graph``), and each custom
``autograd.Function`` tested once against its forward (``functions``, ``function_test``, ``side_effects``). torch is
imported only when the program imported it.
"""
