"""Lanes and execution: compile a case on one lane, run its calls, collect what came out.

``lane`` lists the lanes and prepares a process for one; ``execute`` runs a case;
``runners`` and ``export_runner`` build the compiled side; ``guards`` plans extra
calls from the guards a compile installed; ``triton_cpu`` runs Inductor's Triton
code on a CPU through Triton's interpreter.
"""
