from caveat.cli import main

main()
