from ddpdoctor.cli import main

main()
