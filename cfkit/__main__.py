from cfkit.cli import main

main()
