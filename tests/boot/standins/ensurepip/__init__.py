"""Stand-in for ensurepip (Debian ships it in python3-venv) in the boot test: `python3 -m venv`
calls it to put pip into the new environment; here pip is the stand-in that installs nothing."""
