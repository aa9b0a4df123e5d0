"""Built-in checks. Every module in this package is imported by `registry.load_all()`.

The checks live inside the package (not a top-level `checks/` folder) because they must ship in
the wheel and be importable wherever ddpdoctor is installed, exactly like third-party plugins.
One module per family; each check is a pure function of the snapshot.
"""
