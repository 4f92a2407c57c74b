import os
import sys

COMPAT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if COMPAT not in sys.path:
    sys.path.insert(0, COMPAT)
