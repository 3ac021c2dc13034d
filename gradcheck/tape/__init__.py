"""Reading the tape: what one recording holds and how its arrays are called.

What one launch reads and writes, and which argument carries which array (``launch_access``), the arguments of a
pass's launches (``tape_arguments``), which arrays a loss reaches (``reachability``), the names a program's arrays go
by (``naming``), and the dataflow of one recording as a graph of launches and arrays (``flow_graph``). Nothing here
runs a kernel.
"""
