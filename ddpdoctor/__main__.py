from ddpdoctor import proctree
from ddpdoctor.cli import main

proctree.own_this_process()  # `python -m ddpdoctor`: this process exists to run the command
main()
