"""The topology map page: its model from the capacity model and the workloads (``build``,
``workloads``, ``model``) and one self-contained HTML document (``render``, ``panels``, ``assets``).

Pure: the controller serves and the CLI writes the same page from the same data."""
