from gradcheck.cli import main

main()
